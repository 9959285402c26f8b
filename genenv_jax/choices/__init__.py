"""The typed choices of the RL maths: the options that the settings tree offers (coevolution.settings: GrpoSettings,
EnvSettings) and rl.grpo and rl.curriculum dispatch on, each with one line.

They sit here, in the lowest room (docs/DESIGN.md, "Rooms"), because both sides need them and the settings must not
import the rl maths: `import genenv_jax.coevolution.settings` loads no step or rl module (tests/unit/coevolution/
test_settings.py). rl.grpo keys its dispatch tables on these names (`dispatch` checks that a table holds exactly
them). The step's own choices (its modes, which fresh tasks join D_env) are declared in coevolution.settings, above
which the step sits. This module imports nothing of the package."""

from __future__ import annotations

from typing import Literal, Mapping, TypeVar, get_args

# The agent's advantage estimator (GrpoSettings.advantage; rl.grpo.compute_advantages):
#   grpo    (r - group mean) / (group std + eps): DeepSeekMath's GRPO;
#   rloo    r minus the mean of the group's other rewards: REINFORCE leave-one-out;
#   drgrpo  r - group mean, no std division: Dr. GRPO;
#   mean    drgrpo under its other name.
AdvantageEstimator = Literal["grpo", "rloo", "drgrpo", "mean"]
ADVANTAGE_ESTIMATORS = get_args(AdvantageEstimator)

# The per-token KL estimator of KL(π ‖ π_ref) (GrpoSettings.kl_estimator; rl.grpo.kl_penalty), with r = log π_ref/π:
#   k1  -r: unbiased, can be negative per token;
#   k2  r²/2: biased, low variance;
#   k3  exp(r) - r - 1: unbiased and >= 0 (GRPO's, DeepSeekMath eq. 4).
KlEstimator = Literal["k1", "k2", "k3"]
KL_ESTIMATORS = get_args(KlEstimator)

# How a loss's per-token terms are averaged (GrpoSettings.loss_agg; rl.grpo.aggregate_loss):
#   token-mean               over every valid token of the batch (DAPO; GenEnv's default);
#   seq-mean-token-mean      over each sequence's tokens, then over the sequences (the original GRPO);
#   seq-mean-token-sum-norm  each sequence's token sum over a constant, rows x the generation length (Dr. GRPO);
#   seq-mean-token-scale     seq-mean-token-sum-norm under its other name.
LossAggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm", "seq-mean-token-scale"]
LOSS_AGGREGATIONS = get_args(LossAggregation)

# The env's objective (EnvSettings.objective; the step dispatches on it, rl.curriculum has both losses):
#   rwr  reward-weighted regression on the tasks in the α band, weights ∝ exp(λ R_env) (GenEnv's);
#   pg   GRPO on R_env, the K samples of each seed a group.
EnvObjective = Literal["rwr", "pg"]
ENV_OBJECTIVES = get_args(EnvObjective)
RWR, PG = ENV_OBJECTIVES

# How an env update whose KL to the env before it exceeds `env.max_kl` is cut (EnvSettings.kl_cap_mode;
# rl.curriculum.kl_cap_scale):
#   skip   not applied;
#   scale  scaled by max_kl / KL;
#   sqrt   scaled by sqrt(max_kl / KL) (KL grows about quadratically in the step: lands near max_kl).
KlCapMode = Literal["skip", "scale", "sqrt"]
KL_CAP_MODES = get_args(KlCapMode)
CAP_SKIP, CAP_SCALE, CAP_SQRT = KL_CAP_MODES

T = TypeVar("T")


def dispatch(options: tuple[str, ...], table: Mapping[str, T]) -> dict[str, T]:
  """`table` (each option's implementation) as a dict, checked to hold exactly `options`, in their order."""
  if tuple(table) != tuple(options):
    raise ValueError(f"a dispatch table holds {tuple(table)}, not the declared choices {tuple(options)}")
  return dict(table)
