"""The bundled stop-reason eval suite (data only: one ``ect.stop-eval/1`` case per JSON file)."""
