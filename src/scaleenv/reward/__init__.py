"""Rule-based rewards from the final world state, column by column, plus answer facts."""

from scaleenv.reward.facts import AnswerFact, fact_stated
from scaleenv.reward.match import Matcher, fuzzy_similarity
from scaleenv.reward.state import Reward, compute_reward

__all__ = ["AnswerFact", "Matcher", "Reward", "compute_reward", "fact_stated", "fuzzy_similarity"]
