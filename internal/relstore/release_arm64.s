#include "textflag.h"

// func Store(p *uint64, v uint64)
// STLR: a store-release, ordered after every earlier load and store.
TEXT ·Store(SB), NOSPLIT, $0-16
	MOVD p+0(FP), R0
	MOVD v+8(FP), R1
	STLR R1, (R0)
	RET
