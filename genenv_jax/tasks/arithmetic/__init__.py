"""The embedded default domain: integer arithmetic with a difficulty knob."""
