"""devbridge's Triton backend, found by Triton through the `triton.backends`
entry point named `devbridge` (Triton imports `compiler` and `driver` from
here at `import triton`; each holds exactly one concrete class, and neither
imports devbridge or torch before it is used).
"""
