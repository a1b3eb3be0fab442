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

// func PrefetchW(p *uint64)
// PREFETCHW (0F 0D /1): fetch p's line for writing, without waiting, so a
// later store to it does not wait for the line's owner.
TEXT ·PrefetchW(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET

// func Prefetch(p *uint64)
TEXT ·Prefetch(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET
