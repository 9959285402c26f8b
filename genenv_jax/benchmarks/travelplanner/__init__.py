"""TravelPlanner: the evaluator, its checks and database, and its training task family."""
