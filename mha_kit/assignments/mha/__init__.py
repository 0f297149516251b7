"""Multi-head attention, step by step: six step functions, one head, the looped and the fused
module, and the speed of the fused one over the looped one."""
