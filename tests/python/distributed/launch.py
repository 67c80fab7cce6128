"""Runs a worker script (workers/) in a fresh Python process and reads back what it wrote.

Distributed workers start their own ranks (torch.multiprocessing, or Lightning's launcher,
which re-executes sys.argv: that is why they are scripts, never run inside pytest). Each gets
an environment without the variables of any torchrun/SLURM/Lightning job around it, and a
free port of its own.
"""

import json
import os
import pathlib
import socket
import subprocess
import sys

WORKERS = pathlib.Path(__file__).resolve().parent / "workers"

# Read by torch.distributed and Lightning; inherited values would join or mimic another job.
_DIST_VARS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK",
              "GROUP_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "PL_GLOBAL_SEED",
              "PL_TRAINER_GPUS", "SLURM_NTASKS", "SLURM_JOB_NAME", "SLURM_JOB_ID")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _DIST_VARS}
    env["MASTER_ADDR"] = "127.0.0.1"
    env["MASTER_PORT"] = str(free_port())
    env["OMP_NUM_THREADS"] = "1"  # two ranks on a small machine: no oversubscription
    env["PYTHONWARNINGS"] = "ignore"
    return env


def run_worker(script: str, out_dir: pathlib.Path, *args, ranks: int = 2, timeout: int = 240):
    """Runs workers/<script> with ``--out out_dir``; returns the results of ranks 0..ranks-1
    (the JSON each rank wrote to out_dir/rank<N>.json)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(WORKERS / script), "--out", str(out_dir), *map(str, args)]
    proc = subprocess.run(cmd, env=worker_env(), cwd=out_dir, capture_output=True, text=True,
                          timeout=timeout)
    log = f"$ {' '.join(cmd)}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-8000:]}"
    assert proc.returncode == 0, log
    results = []
    for rank in range(ranks):
        path = out_dir / f"rank{rank}.json"
        assert path.exists(), f"rank {rank} wrote no result\n{log}"
        results.append(json.loads(path.read_text()))
    return results
