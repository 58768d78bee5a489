"""Windows over batches: which windows a committed batch fires (pure), and the window store in Redis."""
