// Reference only, not built by cargo: seed 002's Go scheduler, verbatim, with the two pop
// benchmarks of ../pop.rs, to check that the Rust port (src/seed002.rs) does not overstate the
// seed's cost per probed queue. Run: go test -bench . -benchtime 1s seed002_test.go
package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// ---- seed 002, verbatim (comments trimmed) ----

type Task func()

type PriorityTaskScheduler struct {
	major       chan Task
	minors      sync.Map
	minorsCount int64
}

func NewPriorityTaskScheduler(buffer int) *PriorityTaskScheduler {
	return &PriorityTaskScheduler{major: make(chan Task, buffer)}
}

func (s *PriorityTaskScheduler) PushMajor(t Task) { s.major <- t }

func (s *PriorityTaskScheduler) NewMinorQueue(buffer int) chan Task {
	minor := make(chan Task, buffer)
	id := atomic.AddInt64(&s.minorsCount, 1)
	s.minors.Store(id, minor)
	return minor
}

func (s *PriorityTaskScheduler) Pop() Task {
	select {
	case t := <-s.major:
		return t
	default:
		return s.stealFromMinors()
	}
}

func (s *PriorityTaskScheduler) stealFromMinors() Task {
	var found Task
	s.minors.Range(func(key, value interface{}) bool {
		ch, ok := value.(chan Task)
		if !ok {
			return true
		}
		select {
		case t, open := <-ch:
			if !open {
				s.minors.Delete(key)
				return true
			}
			found = t
			return false
		default:
			return true
		}
	})
	return found
}

// ---- the benchmarks of ../pop.rs ----

var sourceCounts = []int{10, 100, 1000, 10000}

// pop_4_busy_of_n: major empty, n minor queues of which 4 hold tasks; pop one, push it back.
func BenchmarkPop4BusyOfN(b *testing.B) {
	for _, n := range sourceCounts {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := NewPriorityTaskScheduler(1024)
			queues := make([]chan Task, n)
			for i := range queues {
				queues[i] = s.NewMinorQueue(16)
			}
			for k := 0; k < 4; k++ {
				q := queues[k*n/4]
				var t Task
				t = func() { q <- t }
				for j := 0; j < 8; j++ {
					q <- t
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.Pop()() // the task pushes itself back into its queue
			}
		})
	}
}

// pop_all_idle_of_n: nothing queued anywhere; a pop that finds nothing.
func BenchmarkPopAllIdleOfN(b *testing.B) {
	for _, n := range sourceCounts {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := NewPriorityTaskScheduler(1024)
			for i := 0; i < n; i++ {
				s.NewMinorQueue(16)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if s.Pop() != nil {
					b.Fatal("found a task in an idle scheduler")
				}
			}
		})
	}
}
