#include "textflag.h"

// func Store(p *uint64, v uint64)
// A plain MOV: x86 keeps stores in program order (TSO), so earlier stores
// are visible before this one, without the full fence (XCHG) of
// atomic.Uint64.Store that waits for the line while a peer polls it.
TEXT ·Store(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET
