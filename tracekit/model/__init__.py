"""The analytic model: hardware, FLOPs, collectives (α-β, bus bandwidth), memory, pipeline.

One formula in one place, each with its source in the docstring. Vocabulary beside the
formulas: the figure catalog (`figures`), communication kernels (`commkernels`), rank
lists as ranges (`ranks`).
"""
