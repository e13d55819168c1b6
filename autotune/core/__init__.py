"""The bottom layer: errors, `Dim`, the frozen specs and plan that cross every stage, plan arrays and labels. Imports nothing else of autotune."""
