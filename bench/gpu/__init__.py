"""bench.gpu: the side-by-side GPU benchmark of issue 7 (ours against torch peers, one run).

    python -m bench.gpu.run [--quick] [--cases PATTERNS] [--out DIR]

docs/performance.md describes the method and how to run it on the H200.
"""
