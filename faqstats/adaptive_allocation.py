"""TODO(adaptive helper): adaptive allocation of a leaderboard's queries across models."""


def fit_adaptive(board, models, names):
    """TODO: run the adaptive design for ``board`` (a LeaderboardEstimator) and return its JointResults."""
    raise NotImplementedError("the adaptive design is being built")
