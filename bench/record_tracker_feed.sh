#!/usr/bin/env bash
# SUROGATE_PYTHON for a run whose trackers are checked on another machine (a GPU machine without
# wandb / aim): copies everything the engine sends the tracker helper to $TRACKER_FEED_COPY, and
# runs the helper with python3 as usual. bench/check_trackers.py --replay feeds the copy through
# the same helper where the SDKs are installed.
set -o pipefail
tee "${TRACKER_FEED_COPY:?set TRACKER_FEED_COPY to the file that receives the feed}" | exec python3 "$@"
