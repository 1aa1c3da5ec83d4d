"""People in the loop: review a run's cases, import and export labels, and measure how far the
judge agrees with people (see docs/review.md)."""
