"""Surogate's report_to helper: feeds Weights & Biases and Aim with a training run's records.

The engine (train/observe/tracker_feed.cpp) starts this script with `python3 -u -c` and writes JSON
lines to its stdin:
  {"type": "start", "trackers": ["wandb", "aim"], "run_name", "config_yaml", "resumed",
   "state_file", "wandb": {"project", "name", "dir"}, "aim": {"experiment", "repo", "name"}}
  then every record of the run's JSONL log, as logged ("config", "step", "eval", "gpu",
  "checkpoint", "summary", "error", ...), then {"type": "finish"}.
End of input without "finish" means the run failed (wandb exit code 1; Aim run not marked
finished). Metric names are the log's keys under a prefix, at the log's step:
  step records -> train/<key>  (train/loss, train/lr, train/grad_norm, train/tokens_per_second, ...)
  eval records -> eval/<key without "eval_">  (eval/loss, eval/accuracy, eval/tokens)
  gpu records  -> gpu<index>/<key>  (gpu0/utilization_percent, gpu0/memory_used_bytes, ...)
The run's ids (wandb run id, Aim run hash) are kept in state_file (trackers.json in the
checkpoint folder), so a resumed run continues the same tracked runs.
A tracker that cannot be imported, started or written to gets one warning line on fd 3 (the
engine's stderr) and is dropped; the others and the training go on. Input is read to its end
whatever happens, so the engine never blocks on a full pipe.
"""
import json
import os
import sys

_warnings = None


def _warning_stream():
    global _warnings
    if _warnings is None:
        _warnings = sys.stderr
        # Spawned by the engine (train/observe/tracker_feed.cpp), fd 3 is the engine's stderr; run any other
        # way (a replay, by hand) fd 3 may be anything, so it is not touched.
        if len(sys.argv) > 1 and sys.argv[1] == "surogate-tracker-helper":
            try:
                _warnings = os.fdopen(3, "w", buffering=1)
            except OSError:
                pass
    return _warnings


def say(line):
    print(line, file=_warning_stream(), flush=True)
    print(line, flush=True)  # the helper log too


def warn(tracker, what):
    say(f"warning: report_to: {tracker}: {what}; training continues without it")


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def metrics_of(record):
    """(step, {name: value}) for a step / eval / gpu record; None for other records."""
    kind = record.get("type")
    step = record.get("step")
    if not isinstance(step, int):
        return None
    metrics = {}
    if kind == "step":
        for key, value in record.items():
            if key not in ("type", "time", "step") and _number(value):
                metrics[f"train/{key}"] = value
    elif kind == "eval":
        for key, value in record.items():
            if key not in ("type", "time", "step", "final") and _number(value):
                name = key[len("eval_"):] if key.startswith("eval_") else key
                metrics[f"eval/{name}"] = value
    elif kind == "gpu":
        for gpu in record.get("gpus", []):
            index = gpu.get("index")
            for key, value in gpu.items():
                if key != "index" and _number(value):
                    metrics[f"gpu{index}/{key}"] = value
    else:
        return None
    return step, metrics


def parse_config(text):
    try:
        import yaml
        value = yaml.safe_load(text)
        return value if isinstance(value, dict) else {"config_yaml": text}
    except Exception:
        return {"config_yaml": text}


class WandbTracker:
    name = "wandb"
    package = "wandb"

    def __init__(self, start, config, state):
        import wandb
        settings = start["wandb"]
        run_id = state.get("wandb_id") if start.get("resumed") else None
        arguments = dict(project=settings["project"], name=settings["name"], config=config,
                         settings=wandb.Settings(console="off"))
        if run_id:
            arguments.update(id=run_id, resume="allow")
        if not os.environ.get("WANDB_DIR") and settings.get("dir"):
            os.makedirs(settings["dir"], exist_ok=True)
            arguments["dir"] = settings["dir"]
        self.run = wandb.init(**arguments)
        state["wandb_id"] = self.run.id
        url = getattr(self.run, "url", None)
        say(f"wandb: run '{settings['name']}' (id {self.run.id})" + (f" at {url}" if url else
                                                                     f" in {self.run.dir}"))

    def log(self, step, metrics):
        self.run.log(metrics, step=step)

    def record(self, key, value):
        self.run.config.update({key: value}, allow_val_change=True)

    def summary(self, values):
        self.run.summary.update(values)

    def finish(self, succeeded):
        self.run.finish(exit_code=0 if succeeded else 1)


class AimTracker:
    name = "aim"
    package = "aim"

    def __init__(self, start, config, state):
        from aim import Run
        settings = start["aim"]
        options = dict(repo=settings.get("repo"), experiment=settings["experiment"],
                       system_tracking_interval=None, capture_terminal_logs=False)
        run_hash = state.get("aim_hash") if start.get("resumed") else None
        self.run = None
        if run_hash:
            try:
                self.run = Run(run_hash=run_hash, **options)
            except Exception as error:  # the repository lost the run: start a new one
                say(f"note: report_to: aim: run {run_hash} cannot be resumed ({error}); starting a new run")
        if self.run is None:
            self.run = Run(**options)
            self.run.name = settings["name"]
            self.run["hparams"] = config
        state["aim_hash"] = self.run.hash
        say(f"aim: run '{settings['name']}' (hash {self.run.hash}) in {self.run.repo.path}")

    def log(self, step, metrics):
        for name, value in metrics.items():
            self.run.track(value, name=name, step=step)

    def record(self, key, value):
        self.run[key] = value

    def summary(self, values):
        self.run["summary"] = values

    def finish(self, succeeded):
        if succeeded:
            self.run.report_successful_finish()
        self.run.close()


TRACKERS = {"wandb": WandbTracker, "aim": AimTracker}


def read_state(path):
    try:
        with open(path) as stream:
            state = json.load(stream)
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def write_state(path, state):
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        temporary = f"{path}.tmp{os.getpid()}"
        with open(temporary, "w") as stream:
            json.dump(state, stream, indent=1)
        os.replace(temporary, path)
    except OSError as error:
        say(f"warning: report_to: cannot write {path} ({error}); a resumed run will start new tracked runs")


def start_trackers(start):
    config = parse_config(start.get("config_yaml", ""))
    state = read_state(start["state_file"]) if start.get("resumed") else {}
    state["run_name"] = start.get("run_name")
    trackers = []
    for name in start.get("trackers", []):
        kind = TRACKERS.get(name)
        if kind is None:
            warn(name, "unknown tracker")
            continue
        try:
            trackers.append(kind(start, config, state))
        except ImportError as error:
            warn(name, f"the Python package '{kind.package}' cannot be imported by {sys.executable} ({error}); "
                       f"install it with `pip install {kind.package}` (scripts/install_deps.sh does)")
        except BaseException as error:  # wandb raises its own errors, some not Exceptions
            warn(name, f"cannot start its run: {type(error).__name__}: {error}")
    write_state(start["state_file"], state)
    return trackers


def handle(tracker, record):
    kind = record.get("type")
    metrics = metrics_of(record)
    if metrics is not None:
        step, values = metrics
        if values:
            tracker.log(step, values)
    elif kind == "config":
        tracker.record("run", {key: value for key, value in record.items() if key not in ("type", "time")})
    elif kind == "startup":
        tracker.record("startup_seconds", {key: value for key, value in record.items() if key not in ("type", "time")})
    elif kind == "summary":
        tracker.summary({key: value for key, value in record.items() if key not in ("type", "time")})


def main():
    first = sys.stdin.readline()
    if not first:
        return 0
    start = json.loads(first)
    trackers = start_trackers(start)
    succeeded = False
    failed = False
    for line in sys.stdin:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("type") == "finish":
            succeeded = not failed
            break
        if record.get("type") == "error":
            failed = True
        for tracker in list(trackers):
            try:
                handle(tracker, record)
            except BaseException as error:
                warn(tracker.name, f"recording failed: {type(error).__name__}: {error}")
                trackers.remove(tracker)
    for line in sys.stdin:  # after "finish" the engine closes the stream; read to its end
        pass
    for tracker in trackers:
        try:
            tracker.finish(succeeded)
        except BaseException as error:
            warn(tracker.name, f"finishing the run failed: {type(error).__name__}: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
