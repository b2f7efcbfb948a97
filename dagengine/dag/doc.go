// Package dag reads and validates DAG definitions (sundialv1.DagSpec) and
// turns a valid one into an immutable Graph: the nodes, who waits for whom,
// the failure policy and each node's timeout. It is pure: no I/O, no clock,
// no goroutines. The DAG engine's definitions consumer calls Decode on every
// record of sundial.jobs with the header "sundial-kind: dag"; the state
// machine (package dagrun) reads only Graphs.
//
// # What a valid DAG is
//
// Every problem is reported at once, each as a FieldError whose Field is the
// protobuf path of the bad value and whose Reason says what is wrong:
//
//   - id: a job id (jobspec.CheckID) without "/"; it must equal the record
//     key. Jobs and DAGs share one id namespace, and "/" is reserved for the
//     jobs of inline nodes, so that dag id + "/" + node id names exactly one
//     node of one DAG.
//   - owner_team, labels, description: the rules of JobSpec.
//   - nodes: at least one and at most MaxNodes.
//   - nodes[i].id: 1 to 100 characters from [A-Za-z0-9._-], unique in the DAG
//     (a duplicate names the first node with the id).
//   - nodes[i].job_id or nodes[i].inline: exactly one. A job_id must be a job
//     id without "/" (an id with "/" is an inline node's job, which no other
//     node may run, whoever holds the id); the job need not exist yet (definitions of different keys arrive in
//     no particular order), and a node whose job is missing when it starts
//     fails with reason "job_not_found". An inline job is validated like a
//     JobSpec (paths "nodes[i].inline.<field>") after its empty id and
//     owner_team are filled in (dag id + "/" + node id, the DAG's owner);
//     it must have no schedule, and a given id must be exactly that one.
//   - nodes[i].inline.owner_team: empty or the DAG's owner_team. A DAG's
//     node runs belong to the DAG's team (quota, dead letters), never to
//     another's. A job_id node must name a job of the DAG's team too; that
//     is checked against the job's stored owner_team when the node starts
//     (package dagengine), since the job may change or not exist yet.
//   - nodes[i].timeout: positive whole milliseconds, at most MaxNodeTimeout.
//   - nodes[i].parents[j]: a node of the DAG ("unknown node"), not the node
//     itself ("self-edge"), listed once.
//   - the parents relation is acyclic: each cycle is reported once, as the
//     field "nodes" and the reason "cycle a -> b -> c -> a", where each node
//     is a parent of the next. The path is the shortest cycle through the
//     first node (in definition order) of each strongly connected component.
//   - schedule: the rules of JobSpec.schedule (the same code compiles both).
//   - failure_policy: a defined value.
//
// # Dependencies
//
// Field rules shared with job definitions come from package registry
// (CheckID, Limits.ValidateSpec, CompileSchedule), so a DAG's inline job and
// a registered job are held to the same rules by the same code.
package dag
