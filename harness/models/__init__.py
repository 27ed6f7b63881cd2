"""Models as the harness runs them: loading a checkpoint directory into a `ModelBundle` (loading.py;
safetensors only, shards included), the three real MTP checkpoint layouts, MTP depths built from the target's
own decoder-layer class, the hidden state the first depth reads, float64 numerics where transformers hard-codes
float32, hybrid models' Gated DeltaNet layers and their recurrent state, teacher-forced whole-sequence passes,
the prompt fixtures, and glibc's allocator told to keep freed memory for the passes (allocator.py).

Imports: harness.contract."""
