package target

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Error codes set by this package (RunError.code). HTTP responses use
// "http_<status>".
const (
	CodeTimeout        = "timeout"
	CodeConnection     = "connection"
	CodeCancelled      = "cancelled"
	CodeUnknownHandler = "unknown_handler"
	CodeInvalidTarget  = "invalid_target"
	CodeHandler        = "handler_error"
	CodeKafka          = "kafka"
	CodeExecNotAllowed = "exec_not_allowed"
	CodeExecExit       = "exec_exit"
	CodeExecStart      = "exec_start"
)

// Error is a failed attempt, classified.
type Error struct {
	// Code is machine-readable (RunError.code).
	Code string
	// Message is for people.
	Message string
	// Retryable is false when another attempt cannot succeed.
	Retryable bool
	// RetryAfter is the downstream's minimum wait before the next attempt;
	// 0 for none.
	RetryAfter time.Duration
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Fail returns an *Error for a handler's own failure with a code of its
// choosing.
func Fail(code string, retryable bool, err error) *Error {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return &Error{Code: code, Message: msg, Retryable: retryable, Err: err}
}

// Permanent marks err as not retryable, with code "handler_error" unless err
// already is an *Error (whose code is kept).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	var te *Error
	if errors.As(err, &te) {
		cp := *te
		cp.Retryable = false
		return &cp
	}
	return Fail(CodeHandler, false, err)
}

// Classify turns any error of an execution into an *Error. An *Error in the
// chain is returned as is; a deadline is a retryable timeout; a cancellation
// is "cancelled" (the runner decides from the context's cause what it means);
// anything else is retryable with fallbackCode.
func Classify(err error, fallbackCode string) *Error {
	if err == nil {
		return nil
	}
	var te *Error
	switch {
	case errors.As(err, &te):
		return te
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeTimeout, Message: err.Error(), Retryable: true, Err: err}
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeCancelled, Message: err.Error(), Retryable: true, Err: err}
	}
	return &Error{Code: fallbackCode, Message: err.Error(), Retryable: true, Err: err}
}

func invalid(format string, args ...any) *Error {
	return &Error{Code: CodeInvalidTarget, Message: fmt.Sprintf(format, args...)}
}

func notAllowed(format string, args ...any) *Error {
	return &Error{Code: CodeExecNotAllowed, Message: fmt.Sprintf(format, args...)}
}
