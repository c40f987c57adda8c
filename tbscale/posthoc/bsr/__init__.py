"""Behavioral self-rewarding (BSR): verifier-conditioned reward refinement from pairwise judgments.

Offline version of the method in /work/shared/seeds/bsr-self-reward.txt (SPEC "bsr-self-reward.txt"),
run over finished tbscale runs. See docs/bsr.md for the full description; in short:

1. **Groups**: all trials of one task within one setting (``group_by="setting"``) or of one task
   across every given setting and run (``group_by="task"``).
2. **Buckets**: inside a group, trajectories are split by verifier outcome (``passed``): bucket 0
   (fail) and bucket 1 (pass). Only the buckets named in ``BsrParams.buckets`` are judged
   (paper's main setting: failure only, ``a1 = 0``).
3. **Schedule** (Appendix A.1): exhaustive pairs for ``2 <= n < 5``; Swiss rounds for ``n >= 5``
   with ``T = min(ceil(log2 n) + 2, n - 1)`` rounds and at most ``floor(n/2)`` comparisons per
   round, pairing by current net weighted wins and never repeating a pair.
4. **Judge**: a model (any litellm model, or ``sim/bsr_judge``) sees the task instruction, the
   shared outcome and two trajectory summaries (presentation order randomized with the seed), and
   answers JSON ``{"winner": "A"|"B", "strength": 1|2|3, "reason": ...}``.
5. **Bradley-Terry** (Appendix A.2, formula lost in extraction): maximize
   ``sum_c alpha_c * log sigmoid(s_win - s_lose) - lam/2 * ||s||^2`` by Newton's method (the
   objective is strictly concave for ``lam > 0``, so the optimum is unique).
6. **Reward mapping** (formulas lost in extraction; our choices, all parameters):
   ``z = (s - mean s) / std s`` (0 when std is 0);
   soft deadzone ``d = sign(z) * (g(|z|) - g(0))`` with ``g(x) = tau * softplus((x - delta) / tau)``
   (``tau = 0`` gives the hard deadzone ``max(|z| - delta, 0)``, ``delta = tau = 0`` the identity);
   centre ``u = d - mean d``; bound ``aux = a_y * u / max|u|`` so ``|aux| <= a_y`` and the bucket's
   largest deviation has amplitude exactly ``a_y``.
7. **Ordering guarantee**: refined = reward + aux. If ``a0 + a1`` is not smaller than the gap
   between the lowest passing and highest failing verifier reward, both amplitudes are shrunk to
   ``(1 - margin) * gap``; every passing trajectory then keeps a strictly higher refined reward than
   every failing one, which :func:`refine` asserts.
8. **Random control**: the same mapping with ``u`` drawn uniformly from [-1, 1] and centred, then
   bounded the same way (same amplitude ``a_y``), with no judge calls.

Behaviour statistics (Table 9) use tbscale.shell for every command classification.
"""

from tbscale.posthoc.bsr.params import BUCKET_NAMES, FAIL, PASS, BsrParams
from tbscale.posthoc.bsr.run import (BsrResult, Trajectory, _judge_bucket, bsr_judge_key, judgement_store, llm_judge,
                                     load_trajectories, refine, reward_rows, verifier_reward, write_outputs)
from tbscale.posthoc.bsr.scoring import (aux_from_scores, center_and_bound, check_ordering, effective_amplitudes,
                                         exhaustive_pairs, fit_bradley_terry, normalize, random_aux, soft_deadzone,
                                         swiss_round_pairs, swiss_rounds)
from tbscale.posthoc.bsr.trajectories import (Step, behaviour_stats, judge_messages, load_steps, parse_judgment,
                                              summarize)

__all__ = ["BUCKET_NAMES", "BsrParams", "BsrResult", "FAIL", "PASS", "Step", "Trajectory", "_judge_bucket", "bsr_judge_key", "judgement_store",
           "aux_from_scores", "behaviour_stats", "center_and_bound", "check_ordering", "effective_amplitudes",
           "exhaustive_pairs", "fit_bradley_terry", "judge_messages", "llm_judge", "load_steps", "load_trajectories",
           "normalize", "parse_judgment", "random_aux", "refine", "reward_rows", "soft_deadzone", "summarize",
           "swiss_round_pairs", "swiss_rounds", "verifier_reward", "write_outputs"]
