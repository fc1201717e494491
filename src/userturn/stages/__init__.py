"""The probe's stages, in pipeline order: assistant → verify → user_turn → classify → aggregate."""
