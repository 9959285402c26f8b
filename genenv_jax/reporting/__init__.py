"""Statistics and run reports: noise figures and the co-evolution phenomena verdicts."""
