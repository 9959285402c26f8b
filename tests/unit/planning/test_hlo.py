"""planning.hlo reads an optimised HLO module's collectives: kinds, ring bytes, loop trip counts and source lines,
checked on a hand-written module whose answers are worked out below."""

import pytest

from genenv_jax.planning import hlo

# ENTRY runs a loop of 5 trips whose body runs an inner loop of 3 trips. The entry holds an all-gather of f32[8,16]
# over 4 devices; the outer body an all-reduce of bf16[1024] over 2; the inner body an async collective-permute of
# s32[64] and a reduce-scatter whose result is f32[32] over groups of 4; a windowed-einsum body one permute.
MODULE = """HloModule jit_step, num_partitions=4

FileNames
1 "/x/genenv_jax/models/transformer.py"
2 "/x/site-packages/jax/_src/lax.py"

FunctionNames
1 "dense"
2 "dot"

FileLocations
1 {file_name_id=1 function_name_id=1 line=46 end_line=46 column=1 end_column=2}
2 {file_name_id=2 function_name_id=2 line=9 end_line=9 column=1 end_column=2}

StackFrames
1 {file_location_id=1 parent_frame_id=0}
2 {file_location_id=2 parent_frame_id=1}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%inner_cond (p: (s32[])) -> pred[] {
  %p = (s32[]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %c = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}

%inner_body (p: (s32[])) -> (s32[]) {
  %p = (s32[]) parameter(0)
  %x = s32[64]{0} parameter(1)
  %cp = (s32[64]{0}, s32[64]{0}, u32[], u32[]) collective-permute-start(%x), channel_id=1, \
source_target_pairs={{0,1},{1,0}}, metadata={op_name="jit(step)/ppermute" stack_frame_id=2}
  %rs = f32[32]{0} reduce-scatter(%y), channel_id=2, replica_groups=[1,4]<=[4], dimensions={0}, to_apply=%add
  ROOT %t = (s32[]) tuple(%i)
}

%outer_cond (p: (s32[])) -> pred[] {
  %p = (s32[]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %c = s32[] constant(5)
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}

%outer_body (p: (s32[])) -> (s32[]) {
  %p = (s32[]) parameter(0)
  %ar = bf16[1024]{0} all-reduce(%z), channel_id=3, replica_groups={{0,1},{2,3}}, to_apply=%add
  %w = (s32[]) while(%p), condition=%inner_cond, body=%inner_body
  ROOT %t = (s32[]) tuple(%i)
}

%lost_body (p: (s32[])) -> (s32[]) {
  %p = (s32[]) parameter(0)
  ROOT %t = (s32[]) tuple(%i)
}

%win_cond (p: (s32[], f32[16])) -> pred[] {
  %p = (s32[], f32[16]) parameter(0)
  %k = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(16)
  ROOT %lt = pred[] compare(%k, %n), direction=LT
}

%windowed_dot_general_body_ag.1 (p: (s32[], f32[16])) -> (s32[], f32[16]) {
  %p = (s32[], f32[16]) parameter(0)
  %k = s32[] get-tuple-element(%p), index=0
  %q = f32[16]{0} get-tuple-element(%p), index=1
  %two = s32[] constant(2)
  %next = s32[] add(%k, %two)
  %cp2 = f32[16]{0} collective-permute(%q), channel_id=4, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  ROOT %t = (s32[], f32[16]) tuple(%next, %cp2)
}

ENTRY %main (a: f32[2,16]) -> f32[8,16] {
  %a = f32[2,16]{1,0} parameter(0)
  %ag = f32[8,16]{1,0} all-gather(%a), channel_id=5, replica_groups=mesh['axis_0'=4] \
{'axis_0'}, dimensions={0}, metadata={op_name="jit(step)/dot_general" stack_frame_id=1}
  %w = (s32[]) while(%t0), condition=%outer_cond, body=%outer_body
  %mosaic = f32[8] custom-call(%a), custom_call_target="tpu_custom_call"
  %win = (s32[], f32[16]) while(%t1), condition=%win_cond, body=%windowed_dot_general_body_ag.1
  %lost = (s32[]) while(%t0), condition=%unknown_cond, body=%lost_body
  ROOT %r = f32[8,16]{1,0} copy(%ag)
}
"""


def _by_kind(report, kind):
  [c] = [c for c in report.collectives if c.kind == kind and "windowed" not in c.computation]
  return c


def test_kinds_bytes_trip_counts_and_sources():
  report = hlo.analyse(MODULE)
  assert report.mosaic_kernels == 1
  assert report.unknown_loops == ("lost",)  # its condition computation is not in the module: counted once

  ag = _by_kind(report, "all-gather")  # 512 bytes gathered over 4: each device receives 3/4 of them
  assert (ag.buffer_bytes, ag.group, ag.bytes, ag.executions) == (512, 4, 384.0, 1)
  assert ag.source == "models/transformer.py:46 dense"

  ar = _by_kind(report, "all-reduce")  # 2 KiB over pairs: 2 (n-1)/n = 1 times the buffer, 5 times
  assert (ar.buffer_bytes, ar.group, ar.bytes, ar.executions) == (2048, 2, 2048.0, 5)

  cp = _by_kind(report, "collective-permute")  # the async start's operand, the whole buffer, 5 x 3 times
  assert (cp.buffer_bytes, cp.bytes, cp.executions) == (256, 256.0, 15)
  assert cp.source == "models/transformer.py:46 dense"  # jax's own frame is skipped for the caller's

  rs = _by_kind(report, "reduce-scatter")  # the array reduced is the result times the group: 512 bytes
  assert (rs.buffer_bytes, rs.group, rs.bytes, rs.executions) == (512, 4, 384.0, 15)


def test_collective_matmul_permutes_count_as_the_gather_they_move():
  report = hlo.analyse(MODULE)
  [win] = [c for c in report.collectives if "windowed" in c.computation]
  assert win.kind == "collective-permute" and win.role == "all-gather"
  assert win.executions == 8  # i < 16, stepped by 2
  totals = hlo.summarise(report)
  assert totals["collective-permute"]["ops"] == 2 and totals["collective-permute"]["executions"] == 15 + 8
  assert totals["collective-permute"]["bytes"] == 256 * 15 + 64 * 8
  assert totals["all-gather"]["role_bytes"] == 384 + 64 * 8  # the gather itself and the matmul's permutes
  assert totals["all-reduce"]["bytes"] == 5 * 2048
  kinds = {kind for kind, *_ in hlo.by_source(report)}
  assert "collective-permute (all-gather matmul)" in kinds


@pytest.mark.parametrize(
  "attrs,expected",
  [
    ("replica_groups={{0,1,2,3},{4,5,6,7}}", 4),
    ("replica_groups=[2,16]<=[32]", 16),
    ("replica_groups=mesh['axis_0'=4,'axis_1'=8] {'axis_1'}", 8),
    ("replica_groups=mesh['axis_0'=4,'axis_1'=8] {'axis_0','axis_1'}", 32),
    ("channel_id=1", 7),  # no groups named: every partition
  ],
)
def test_replica_group_sizes(attrs, expected):
  assert hlo._group_size(attrs, 7) == expected
