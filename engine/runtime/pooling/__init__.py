"""Pooling models: ``spec`` (what the model directory says about pooling), ``head`` (the
pooled vector to the answer: Dense, Matryoshka, normalize; class-score activations;
refusals), ``encoder`` and ``encoder_engine`` (the encoder-only engine: BERT, XLM-RoBERTa,
ModernBERT)."""
