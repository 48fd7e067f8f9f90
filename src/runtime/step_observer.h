// What a backend calls around the steps of a plan when a training device needs to act between
// them: ZeRO-3's weight gathers (compiler/weight_gathering.h) and the gradient buckets reduced
// as the backward completes them (train/device/gradient_buckets.h). before_step(i) is called
// right before step i's kernel is run (CPU) or enqueued (CUDA), after_step(i) right after; an
// observer acts only on the steps its schedule names. A CUDA backend with an observer set runs
// its steps eagerly (no CUDA graph), since the observer's work is decided on the host.
#pragma once

#include <cstddef>
#include <vector>

namespace surogate::runtime {

class StepObserver {
public:
  virtual ~StepObserver() = default;
  virtual void before_step(size_t step) = 0;
  virtual void after_step(size_t step) = 0;
};

// Several observers in one (gathers and gradient buckets on one backend), called in list order.
class StepObserverList final : public StepObserver {
public:
  void add(StepObserver* observer) { observers_.push_back(observer); }
  bool empty() const { return observers_.empty(); }
  void before_step(size_t step) override {
    for (StepObserver* observer : observers_) observer->before_step(step);
  }
  void after_step(size_t step) override {
    for (StepObserver* observer : observers_) observer->after_step(step);
  }

private:
  std::vector<StepObserver*> observers_;
};

}  // namespace surogate::runtime
