package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// signalPid sends sig to pid. For SIGSTOP it returns only once every thread
// of the process is stopped: kill(2) returns when the signal is queued, and
// the group stop takes effect when one of the process's threads next runs;
// on a busy machine a JVM's request threads go on answering for some
// milliseconds after the kill (a produce sent after Pause was acknowledged:
// a flake in CI).
func signalPid(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil {
		return err
	}
	if sig != syscall.SIGSTOP {
		return nil
	}
	end := time.Now().Add(10 * time.Second)
	for {
		running, err := runningThreads(pid)
		if err != nil || running == 0 {
			return err
		}
		if time.Now().After(end) {
			return fmt.Errorf("pid %d: %d threads still not stopped 10s after SIGSTOP", pid, running)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads counts the threads of pid not in the stopped state
// (/proc/PID/task/TID/stat's state field: T stopped, t traced, Z and X
// exiting).
func runningThreads(pid int) (int, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return 0, err
	}
	if len(tasks) == 0 {
		return 0, fmt.Errorf("pid %d: no threads in /proc", pid)
	}
	n := 0
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			return 0, fmt.Errorf("%s: unexpected contents %q", f, s)
		}
		switch s[i+2] {
		case 'T', 't', 'Z', 'X':
		default:
			n++
		}
	}
	return n, nil
}
