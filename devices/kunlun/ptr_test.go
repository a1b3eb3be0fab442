package kunlun_test

import "unsafe"

func ptr(v []float32) unsafe.Pointer { return unsafe.Pointer(&v[0]) }
