// The error a rank raises when the run cannot go on because of another rank: a peer that closed
// its connections (it stopped: an error of its own, killed, out of memory) or that did not answer
// within the timeout (stuck). It is a UserError — printed as is, exit code 2, not reported as a
// bug — whose message names this rank and the collective; the failing rank's own output says why
// it stopped. The trainer adds where the last complete checkpoint is.
#pragma once

#include <string>

#include "core/error.h"

namespace surogate::distributed {

class RankFailure : public UserError {
public:
  explicit RankFailure(const std::string& message) : UserError(message) {}
};

}  // namespace surogate::distributed
