"""The communication env a SLURM rank gets (launchers/protocol.py rank_comm_env, launchers/sbatch.py rank_env):
loopback only when the rendezvous is on this host, the user's interface choice passed through untouched on a
multi-node job, NCCL error handling on, and Megatron's CUDA_DEVICE_MAX_CONNECTIONS=1 for tensor parallelism."""

from __future__ import annotations

from launchers.protocol import rank_comm_env
from launchers.sbatch import rank_env

SLURM_TASK = {
    "SLURM_PROCID": "2",
    "SLURM_NTASKS": "4",
    "SLURM_LOCALID": "0",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_NODEID": "1",
    "SLURM_JOB_ID": "7",
}


def test_multi_node_rank_gets_first_node_address_and_keeps_the_sites_interfaces():
    # the job's first host given as an address, so no resolver is needed: gethostbyname returns it as is
    environ = {**SLURM_TASK, "NCCL_SOCKET_IFNAME": "ib0", "GLOO_SOCKET_IFNAME": "eth1"}
    env = rank_env(environ, tp=2, hostnames=["10.1.2.3", "10.1.2.4"])
    assert env == {
        "RANK": "2",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1",
        "MASTER_ADDR": "10.1.2.3",
        "MASTER_PORT": "20007",  # 20000 + job id 7
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    }  # NCCL/GLOO_SOCKET_IFNAME are not in the update: the rank keeps ib0 / eth1 from its environment


def test_single_host_forces_loopback_and_the_user_wins_every_name():
    assert rank_comm_env({}, "127.0.0.1", tp=1) == {
        "GLOO_SOCKET_IFNAME": "lo",
        "NCCL_SOCKET_IFNAME": "lo",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    user = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3", "CUDA_DEVICE_MAX_CONNECTIONS": "8", "NCCL_SOCKET_IFNAME": "lo"}
    assert rank_comm_env(user, "127.0.0.1", tp=4) == {"GLOO_SOCKET_IFNAME": "lo"}
    # no tensor parallelism: the stream setting is left to CUDA (FSDP's streams overlap better with several queues)
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in rank_comm_env({}, "10.0.0.1", tp=1)


def test_rank_0_resolving_its_own_name_to_loopback_is_not_pinned_to_lo_on_a_multi_host_job():
    # Debian's /etc/hosts maps a host's own name to 127.0.1.1: rank 0 then sees a loopback MASTER_ADDR while its
    # peers on other hosts reach it over the network; pinning rank 0's sockets to lo would cut them off
    env = rank_env(SLURM_TASK, hostnames=["127.0.1.1", "10.1.2.4"])
    assert env["MASTER_ADDR"] == "127.0.1.1" and "GLOO_SOCKET_IFNAME" not in env and "NCCL_SOCKET_IFNAME" not in env
    assert rank_env(SLURM_TASK, hostnames=["127.0.0.1"])["GLOO_SOCKET_IFNAME"] == "lo"  # one host: loopback
