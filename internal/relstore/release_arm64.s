#include "textflag.h"

// func Store(p *uint64, v uint64)
// STLR: a store-release, ordered after every earlier load and store.
TEXT ·Store(SB), NOSPLIT, $0-16
	MOVD p+0(FP), R0
	MOVD v+8(FP), R1
	STLR R1, (R0)
	RET

// func PrefetchW(p *uint64)
// PRFM PSTL1KEEP: fetch p's line for a store, without waiting.
TEXT ·PrefetchW(SB), NOSPLIT, $0-8
	MOVD p+0(FP), R0
	PRFM (R0), PSTL1KEEP
	RET

// func Prefetch(p *uint64)
TEXT ·Prefetch(SB), NOSPLIT, $0-8
	MOVD p+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET
