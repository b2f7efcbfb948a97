package consume

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveStatic ends cl's membership of its consumer group for good, whether
// the member is static (kgo.InstanceID) or not, and then closes cl.
//
// A static member that closes does not leave: the group keeps its
// partitions for it until the session timeout, so that a restart under the
// same instance id gets them back at once with no rebalance. That is what a
// crash should cost, and no more than a crash: a process that stops on
// purpose (a rolling update, a scale-down) is not coming back under that id
// soon, and its partitions would sit idle for the session timeout. So a
// graceful stop leaves explicitly, naming the instance id, and the group
// rebalances at once as it does for a dynamic member. The partitions are
// revoked first (the client's OnPartitionsRevoked runs, as on any leave).
//
// instanceID "" is a dynamic member: LeaveGroupContext sends the leave. The
// error is the leave's; cl is closed either way.
func LeaveStatic(ctx context.Context, cl *kgo.Client, group, instanceID string) error {
	defer cl.Close()
	memberID, _ := cl.GroupMetadata()
	if err := cl.LeaveGroupContext(ctx); err != nil || instanceID == "" || memberID == "" {
		return err
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = memberID
	m.InstanceID = kmsg.StringPtr(instanceID)
	m.Reason = kmsg.StringPtr("graceful stop of a static member")
	req.Members = append(req.Members, m)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("leave group %s as %s: %w", group, instanceID, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("leave group %s as %s: %w", group, instanceID, err)
	}
	for _, m := range resp.Members {
		if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
			return fmt.Errorf("leave group %s as %s: %w", group, instanceID, err)
		}
	}
	return nil
}
