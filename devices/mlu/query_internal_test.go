package mlu

import (
	"testing"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// A pending queue or notifier answers cnrtErrorNotReady, or cnrtErrorBusy
// on CNRTs that still return it: both are "not ready", not failures.
func TestQueriesReadBusyAsNotReady(t *testing.T) {
	d := &Device{}
	require.NoError(t, d.queried("QueueQuery", 0))
	require.ErrorIs(t, d.queried("QueueQuery", cnrtErrorNotReady), rt.ErrNotReady)
	require.ErrorIs(t, d.queried("QueryNotifier", 632014), rt.ErrNotReady)
	err := d.queried("QueueQuery", 632015)
	require.Error(t, err)
	require.NotErrorIs(t, err, rt.ErrNotReady)
}
