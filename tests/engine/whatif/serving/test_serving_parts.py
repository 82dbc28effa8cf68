"""The simulator's parts on their own: block hashes, the KV pool, the KV capacity, the step time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from serving_seed import H100, LLAMA8B, SMALL

from engine.whatif.hardware import get_hardware
from engine.whatif.memory import kv_bytes_per_token_per_gpu, weights_bytes
from engine.whatif.serving import (
    IDEAL,
    ConfigError,
    DoesNotFit,
    Precisions,
    Served,
    ServerConfig,
    StepBatch,
    StepModel,
    kv_capacity,
)
from engine.whatif.serving.config import activation_bytes
from engine.whatif.serving.hashes import extend, prompt_hashes
from engine.whatif.serving.kv import BlockPool
from engine.whatif.shapes import model_shape

REPO = Path(__file__).resolve().parents[4]


def test_a_blocks_hash_depends_on_the_whole_prefix_and_extends_in_pieces():
    a = np.arange(48)
    b = a.copy()
    b[3] = 999  # same second and third blocks' tokens, different first block
    ha, state = prompt_hashes(a, 16)
    hb, _ = prompt_hashes(b, 16)
    assert len(ha) == 3 and not set(ha.tolist()) & set(hb.tolist())
    head, s = prompt_hashes(a[:21], 16)
    tail, s2 = extend(s, 21, a[21:], 16)
    assert head.tolist() + tail.tolist() == ha.tolist() and s2 == state


def test_lru_evicts_the_least_recently_freed_cached_block_first_and_a_requests_last_blocks_first():
    pool = BlockPool(4)
    x = pool.allocate(2)
    for b, h in zip(x, (11, 12), strict=True):
        pool.register(b, h)
    y = pool.allocate(2)
    for b, h in zip(y, (21, 22), strict=True):
        pool.register(b, h)
    pool.release(x)  # free queue: x's last block, x's first
    pool.release(y)
    assert pool.lookup([11, 12], 2) == x and pool.lookup([21, 22], 2) == y
    pool.allocate(1)  # evicts x's last block
    assert pool.lookup([11, 12], 2) == x[:1] and pool.lookup([21, 22], 2) == y
    pool.allocate(1)
    assert pool.lookup([11, 12], 2) == [] and pool.lookup([21, 22], 2) == y


def test_a_touched_free_block_leaves_the_free_queue_and_counts_against_allocation():
    pool = BlockPool(3)
    blocks = pool.allocate(2)
    pool.register(blocks[0], 5)
    pool.release(blocks)
    hits = pool.lookup([5], 1)
    assert hits == blocks[:1] and pool.free == 3
    assert pool.can_allocate(2, hits) and not pool.can_allocate(3, hits)
    mine = pool.take(hits, 2)
    assert mine[0] == blocks[0] and pool.free == 0 and pool.used == 3 == pool.peak


def test_kv_capacity_is_memory_times_utilisation_less_weights_activations_and_runtime():
    config = ServerConfig(gpu_memory_utilization=0.9)
    cap = kv_capacity(config, LLAMA8B)
    weights = weights_bytes(LLAMA8B.shape, "bf16")
    block = 16 * kv_bytes_per_token_per_gpu(LLAMA8B.shape, "bf16")
    left = H100.memory_bytes * 0.9 - weights - activation_bytes(config, LLAMA8B) - 1e9
    assert cap.num_blocks == int(left // block) and cap.block_bytes == block
    tp2 = kv_capacity(ServerConfig(tensor_parallel=2), LLAMA8B)
    assert tp2.weights_bytes == pytest.approx(weights / 2) and tp2.block_bytes == block / 2
    assert kv_capacity(ServerConfig(kv_cache_bytes=4 * 2**30), LLAMA8B).num_blocks == 4 * 2**30 // block
    assert kv_capacity(ServerConfig(num_blocks=77), LLAMA8B).num_blocks == 77


def test_weights_larger_than_memory_do_not_fit_in_one_line():
    l4 = get_hardware("l4")
    served = Served(l4, model_shape("synthetic:llama-3-70b"), Precisions.resolve(l4))
    with pytest.raises(DoesNotFit) as err:
        kv_capacity(ServerConfig(), served)
    assert "weights of" in str(err.value) and "\n" not in str(err.value)


def test_configurations_the_simulator_cannot_run_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="every running decode must fit"):
        ServerConfig(max_num_seqs=512, max_num_batched_tokens=256)
    with pytest.raises(ConfigError, match="tensor_parallel"):
        ServerConfig(tensor_parallel=3)
    with pytest.raises(ConfigError, match="divisible"):
        StepModel(Served(H100, model_shape("synthetic:smollm2-135m"), SMALL.precisions), 2, IDEAL)


def test_the_step_time_is_the_roofline_of_its_batch():
    model = StepModel(LLAMA8B, 1, IDEAL)
    decode = StepBatch(
        seqs=1, decode_tokens=1, logits=1, context_tokens=1000, attention_pairs2=2 * 999 + 2, output_tokens=1
    )
    parts = model.breakdown(decode)
    shape = LLAMA8B.shape
    streamed = weights_bytes(shape, "bf16") - shape.embed_params * 2  # untied: the embedding is only gathered
    kv = 1000 * kv_bytes_per_token_per_gpu(shape, "bf16")
    assert parts["memory_s"] == pytest.approx((streamed + kv) / H100.bandwidth_bytes_per_s)
    assert parts["total_s"] == pytest.approx(parts["memory_s"]) and parts["comm_s"] == 0
    prefill = StepBatch(seqs=1, prefill_tokens=4096, logits=1, context_tokens=4096, attention_pairs2=4096 * 4097)
    p = model.breakdown(prefill)
    flops = (
        2 * shape.linear_params * 4096
        + 2 * shape.lm_head_params
        + 2 * shape.layers * shape.heads * shape.head_dim * 4096 * 4097
    )
    assert p["compute_s"] == pytest.approx(flops / (989e12)) and p["total_s"] == pytest.approx(p["compute_s"])


def test_tensor_parallel_two_halves_the_weight_reads_and_adds_communication():
    batch = StepBatch(seqs=8, decode_tokens=8, logits=8, context_tokens=8000, attention_pairs2=16000, output_tokens=8)
    one = StepModel(LLAMA8B, 1, IDEAL)
    two = StepModel(LLAMA8B, 2, IDEAL)
    assert two.weight_bytes == pytest.approx(one.weight_bytes / 2)
    assert two.breakdown(batch)["memory_s"] < one.breakdown(batch)["memory_s"] * 0.51
    assert one.breakdown(batch)["comm_s"] == 0 < two.breakdown(batch)["comm_s"]


def test_host_overheads_add_to_the_device_time():
    from engine.whatif.serving import StepCosts

    costs = StepCosts(step_s=1e-3, seq_s=1e-5, arrival_s=1e-4, output_token_s=1e-6, eff_bandwidth=1, eff_compute=1)
    batch = StepBatch(
        seqs=4, decode_tokens=4, logits=4, context_tokens=400, attention_pairs2=800, arrivals=1, output_tokens=4
    )
    bare = StepModel(LLAMA8B, 1, IDEAL).batch_time(batch)
    assert StepModel(LLAMA8B, 1, costs).batch_time(batch) == pytest.approx(bare + 1e-3 + 4e-5 + 1e-4 + 4e-6)


def test_the_package_is_pure():
    code = (
        "import sys, engine.whatif.serving\n"
        "heavy = [m for m in ('torch', 'transformers', 'vllm', 'sqlalchemy', 'storage', 'engine.settings') if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "[]"
