// Anchor source for the lockstep_pch target: the precompiled headers hang off it.
