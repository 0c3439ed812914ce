"""TODO(shared helper): the shared design of a leaderboard: one question per draw, asked of every model."""


def fit_shared(board, models, names):
    """TODO: run the shared design for ``board`` (a LeaderboardEstimator) and return its JointResults."""
    raise NotImplementedError("the shared design is being built")
