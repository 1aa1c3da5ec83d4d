"""Test helpers shipped with evalharness (a fake OpenAI-compatible server)."""
