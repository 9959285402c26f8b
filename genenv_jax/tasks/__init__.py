"""The task interfaces (training domain, benchmark), the generic text adapter and the arithmetic family."""
