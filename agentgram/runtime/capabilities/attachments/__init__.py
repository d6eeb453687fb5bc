"""Files that come with a message: saved to the workspace, transcribed, shown to the model."""
