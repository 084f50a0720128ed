"""Rule-based rewards from the final world state, column by column, plus answer facts."""

from scaleenv.formats.task import AnswerFact
from scaleenv.reward.facts import fact_stated, fact_stated_in
from scaleenv.reward.match import Matcher, fuzzy_similarity
from scaleenv.reward.state import Reward, compute_reward

__all__ = ["AnswerFact", "Matcher", "Reward", "compute_reward", "fact_stated", "fact_stated_in",
           "fuzzy_similarity"]
