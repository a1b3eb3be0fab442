package runtime

import (
	"errors"
	"fmt"
)

// Status mirrors Paddle's C_Status; the numeric values are ABI.
type Status int32

const (
	StatusSuccess       Status = 0
	StatusWarning       Status = 1
	StatusFailed        Status = 2 // the operation could not complete: peer lost, timeout, broken communicator
	StatusError         Status = 3 // the caller's arguments are wrong or unsupported
	StatusInternalError Status = 4 // a bug in xccl (a recovered panic)
)

func (s Status) String() string {
	switch s {
	case StatusSuccess:
		return "C_SUCCESS"
	case StatusWarning:
		return "C_WARNING"
	case StatusFailed:
		return "C_FAILED"
	case StatusError:
		return "C_ERROR"
	case StatusInternalError:
		return "C_INTERNAL_ERROR"
	}
	return fmt.Sprintf("Status(%d)", int32(s))
}

// Error is an error that carries the C_Status the ABI returns for it.
type Error struct {
	Status Status
	Msg    string
	Err    error // optional cause
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf makes a C_ERROR (invalid argument / unsupported) error.
func Errorf(format string, args ...any) error {
	return &Error{Status: StatusError, Msg: fmt.Sprintf(format, args...)}
}

// Failedf makes a C_FAILED (operation failed: peer, timeout, transport) error.
func Failedf(format string, args ...any) error {
	return &Error{Status: StatusFailed, Msg: fmt.Sprintf(format, args...)}
}

// WrapFailed wraps cause as a C_FAILED error with context.
func WrapFailed(cause error, format string, args ...any) error {
	if cause == nil {
		return nil
	}
	var e *Error
	if errors.As(cause, &e) {
		return &Error{Status: e.Status, Msg: fmt.Sprintf(format, args...), Err: cause}
	}
	return &Error{Status: StatusFailed, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// StatusOf maps an error to the C_Status the ABI reports for it.
func StatusOf(err error) Status {
	if err == nil {
		return StatusSuccess
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return StatusFailed
}
