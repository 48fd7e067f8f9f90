"""Multi-node training through Ray: the driver `surogate sft` / `surogate pt` hands itself to when
distributed.num_nodes > 1 (distributed/ray_launch.h; this file is compiled into the binary and run
with `python3 -c`, so nothing needs installing beside it but Ray).

Ray places one worker per node (a placement group, one bundle per node: STRICT_SPREAD on a cluster,
SPREAD on a `local` instance, which is one machine); each worker runs the same surogate binary and
command as one process of a world of num_nodes processes, with the launcher variables (RANK = its
node's rank, WORLD_SIZE = num_nodes, MASTER_ADDR / MASTER_PORT = rank 0's node and a port free
there, both found through Ray). The engine does the rest as under any launcher: rank 0 listens
there, the control channel (gloo) joins the processes, and on GPUs the NCCL unique id travels over
it; each node drives its gpus_per_node GPUs (the GPUs of its bundle, which Ray makes visible) as
rank threads, and keeps its token cache under <worker_output_dir>/node-<rank>/.

The driver prints rank 0's output as it comes (the other ranks print only errors, prefixed with
their node), waits for every worker, and when one fails gives the others a moment to report why
they stop (a peer that died fails their collectives at once), stops them and exits with the
failure's code. The driver's SUROGATE_*, NCCL_*, GLOO_* and HF_* variables reach every worker.
Exit codes follow the CLI's: 2 for a problem the user fixes (here: Ray missing, no cluster, too few
nodes), else the failing worker's code.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time


def fail(message, code=2):
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def parse_arguments():
    parser = argparse.ArgumentParser(prog="surogate (Ray driver)")
    parser.add_argument("--binary", required=True)
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--num-nodes", type=int, required=True)
    parser.add_argument("--gpus-per-node", type=int, required=True)  # 0: every GPU of a node
    parser.add_argument("--ray-address", required=True)
    parser.add_argument("--placement-timeout", type=float, default=300.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    arguments = parser.parse_args()
    if arguments.command and arguments.command[0] == "--":
        arguments.command = arguments.command[1:]
    return arguments


def connect(ray, address):
    try:
        if address == "local":
            ray.init(address="local", log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as error:
        hint = ("start one with `ray start --head` on this machine (and `ray start --address=HEAD:6379` on the "
                "others), or set distributed.ray_address to `local` to start a Ray instance here"
                if address == "auto" else "check that the Ray cluster is running and reachable from here")
        fail(f"distributed.ray_address: {address}: cannot connect to a Ray cluster ({error}); {hint}")


def node_bundle(ray, gpus_per_node):
    """The resources one node's worker takes, and the GPUs it drives (0 on a cluster without GPUs)."""
    resources = ray.cluster_resources()
    if resources.get("GPU", 0) == 0:
        return {"CPU": 1}, 0
    gpus = gpus_per_node
    if gpus == 0:
        counts = [node["Resources"].get("GPU", 0) for node in ray.nodes() if node.get("Alive")]
        gpus = int(min(count for count in counts if count > 0))
    return {"CPU": 1, "GPU": gpus}, gpus


def make_worker_class(ray):
    @ray.remote
    class NodeWorker:
        """One node's engine process: started on a thread of its own that lives as long as the process
        (the child dies with this actor: PR_SET_PDEATHSIG is tied to the thread that forked it)."""

        def __init__(self):
            self.lock = threading.Lock()
            self.lines = []
            self.process = None
            self.returncode = None
            self.started = threading.Event()

        def place(self):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind(("", 0))
                port = probe.getsockname()[1]
            return {"ip": ray.util.get_node_ip_address(), "port": port, "host": socket.gethostname(),
                    "node": ray.get_runtime_context().get_node_id()}

        def start(self, argv, variables, cwd):
            def supervise():
                environment = dict(os.environ)
                # Ray sets OMP_NUM_THREADS to the actor's CPUs (1) in its workers; the engine would
                # inherit it and run its BLAS and host work on one thread, and a CPU rank's sums
                # would differ in the last bits from the same rank started by hand. The driver's
                # own setting, if any, comes back through `variables`.
                environment.pop("OMP_NUM_THREADS", None)
                environment.update(variables)

                def die_with_parent():
                    import ctypes
                    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

                try:
                    self.process = subprocess.Popen(argv, env=environment, cwd=cwd if os.path.isdir(cwd) else None,
                                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                                    errors="replace", preexec_fn=die_with_parent)
                except OSError as error:
                    with self.lock:
                        self.lines.append(f"error: cannot start {argv[0]} on this node: {error}")
                        self.returncode = 2
                    self.started.set()
                    return
                self.started.set()
                for line in self.process.stdout:
                    with self.lock:
                        self.lines.append(line.rstrip("\n"))
                code = self.process.wait()
                with self.lock:
                    self.returncode = code

            threading.Thread(target=supervise, daemon=True).start()
            self.started.wait()

        def poll(self):
            with self.lock:
                lines, self.lines = self.lines, []
                return lines, self.returncode

        def stop(self):
            if self.process is not None and self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()

    return NodeWorker


def main():
    arguments = parse_arguments()
    try:
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    except ImportError:
        fail(f"distributed.num_nodes: {arguments.num_nodes} trains through Ray, which {sys.executable} cannot "
             "import: `pip install ray` (scripts/install_deps.sh installs it), or set SUROGATE_PYTHON to a Python "
             "that has it")

    connect(ray, arguments.ray_address)
    bundle, gpus = node_bundle(ray, arguments.gpus_per_node)
    strategy = "SPREAD" if arguments.ray_address == "local" else "STRICT_SPREAD"
    group = placement_group([bundle] * arguments.num_nodes, strategy=strategy)
    ready, _ = ray.wait([group.ready()], timeout=arguments.placement_timeout)
    if not ready:
        nodes = [f"{node['NodeManagerAddress']} ({node['Resources'].get('CPU', 0):g} CPUs, "
                 f"{node['Resources'].get('GPU', 0):g} GPUs)" for node in ray.nodes() if node.get("Alive")]
        fail(f"distributed.num_nodes: {arguments.num_nodes}: the Ray cluster cannot place one worker per node "
             f"(each {bundle}) within {arguments.placement_timeout:g} s; its nodes: {', '.join(nodes) or 'none'}. "
             "Add nodes, or lower distributed.num_nodes / distributed.gpus_per_node")

    NodeWorker = make_worker_class(ray)
    workers = [NodeWorker.options(num_cpus=bundle["CPU"], num_gpus=gpus, max_concurrency=4,
                                  scheduling_strategy=PlacementGroupSchedulingStrategy(
                                      placement_group=group, placement_group_bundle_index=index)).remote()
               for index in range(arguments.num_nodes)]
    places = ray.get([worker.place.remote() for worker in workers])
    # Rank 0 (which writes the log, checkpoints and outputs) on this machine's node when it has one.
    here = ray.get_runtime_context().get_node_id()
    order = sorted(range(len(workers)), key=lambda index: places[index]["node"] != here)
    workers = [workers[index] for index in order]
    places = [places[index] for index in order]

    argv = [arguments.binary] + arguments.command
    master = places[0]
    # The workers' environment is their node's; the driver's settings for the engine travel along.
    forwarded = {name: value for name, value in os.environ.items()
                 if name.startswith(("SUROGATE_", "NCCL_", "GLOO_", "HF_"))
                 or name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    for rank, worker in enumerate(workers):
        variables = dict(forwarded)
        variables.update({"RANK": str(rank), "WORLD_SIZE": str(len(workers)), "LOCAL_RANK": "0",
                          "LOCAL_WORLD_SIZE": "1",
                          "MASTER_ADDR": master["ip"], "MASTER_PORT": str(master["port"])})
        ray.get(worker.start.remote(argv, variables, arguments.cwd))
    print(f"Ray: {len(workers)} nodes ({', '.join(place['host'] for place in places)}), "
          f"{gpus or 'CPU'} {'GPUs' if gpus else 'ranks'} each; rank 0 on {master['host']}", flush=True)

    def stop_all(*_):
        ray.get([worker.stop.remote() for worker in workers])

    signal.signal(signal.SIGTERM, lambda *_: (stop_all(), sys.exit(143)))
    codes = [None] * len(workers)
    failed_at = None  # when the first worker failed: the others get a moment to say why they stop
    try:
        while None in codes:
            for rank, (lines, code) in enumerate(ray.get([worker.poll.remote() for worker in workers])):
                for line in lines:
                    print(line if rank == 0 else f"[node {rank} {places[rank]['host']}] {line}", flush=True)
                if code is not None and codes[rank] is None:
                    codes[rank] = code
                    if code != 0:
                        print(f"error: the worker of node {rank} ({places[rank]['host']}) "
                              + (f"exited with code {code}" if code > 0 else f"was killed by signal {-code}"),
                              file=sys.stderr, flush=True)
                        failed_at = failed_at or time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > 15:
                stop_all()
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        stop_all()
        sys.exit(130)
    failures = [code for code in codes if code not in (None, 0)]
    if failures:
        sys.exit(next((code for code in failures if code > 0), 1))
    sys.exit(0)


if __name__ == "__main__":
    main()
