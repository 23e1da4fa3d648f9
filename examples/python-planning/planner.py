"""The planning rules of the Python planning stage (seed 003, Sub-Contract 2: Planning).

plan() answers a PlanRequest the way agentmesh.planning.v1.PlanningService's contract says
(proto/agentmesh/planning/v1/planning_service.proto): an acyclic plan, in an executable order,
that uses only available tools and has at most max_steps steps (0 means 20). Bad input is
INVALID_INPUT naming the field and the rule; a goal that cannot be reached with the tools is
NO_VIABLE_PLAN; a plan over the step limit is PLAN_TOO_COMPLEX.

Without proposed_steps the goal is split into clauses (lines, bullets, ";", "then"), each a
step "py-N" that depends on the one before; a step's tool is the available tool whose words
overlap the clause most. proposed_steps are validated and put in topological order. A revision
keeps the plan and gives a step that is not done, and whose tool failed, another tool.
"""

import json
import re

from google.protobuf import json_format

from agentmesh.planning.v1 import planning_service_pb2
from agentmesh.type.v1 import message_pb2, plan_pb2
from stage_status import Code, StageError

DEFAULT_MAX_STEPS = 20
MAX_GOAL_BYTES = 64 << 10
# A run id is letters, digits, '_' and '-', at most 128 bytes (the README's "Limits"): it is
# part of the mesh's NATS subjects and keys.
MAX_RUN_ID_BYTES = 128
_RUN_ID = re.compile(r"[A-Za-z0-9_-]+")
# The limits of a request's other fields (the README's "Limits"), as the Go stage keeps them.
MAX_STEPS_LIMIT = 1000
MAX_CONSTRAINTS = 1000
MAX_CONSTRAINTS_BYTES = 128 << 10
MAX_STEP_ID_BYTES = 256
MAX_TOOL_NAME_BYTES = 512
MAX_TOOLS = 1000
MAX_REASON_BYTES = 64 << 10
MAX_NOTE_BYTES = 1 << 10
MAX_OUTPUT_BYTES = 1 << 10
MAX_TOOL_DESCRIPTIONS_BYTES = 1 << 20

# SOURCE says who made the plan (PlanResponse.source): this stage has no model.
SOURCE = "rules"

# STEP_PREFIX starts the id of every step this stage makes ("py-1", "py-2", ...).
STEP_PREFIX = "py-"

TASK_TYPES = {"", "unspecified", "question", "action", "creative", "analysis"}

State = plan_pb2.StepState

_STOP_WORDS = set(
    "a an and are as at be by do does for from how i in is it me my of on or please the then to "
    "what when where which who why will with you your".split()
)
_SUFFIXES = ("ations", "ation", "ings", "ing", "ors", "or", "ers", "er", "es", "ed", "s", "e")
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")
_THEN = re.compile(r"\s+(?:and\s+)?then\s+", re.IGNORECASE)
_LEADING = re.compile(r"^(?:first|next|then|finally|after that)\b[\s,]*", re.IGNORECASE)
_ARITHMETIC = re.compile(
    r"\d\s*(?:[-+*/x\u00d7\u00f7^%]|plus|minus|times|multiplied by|divided by|to the power of)\s*\(?\s*-?\d",
    re.IGNORECASE)
_CALCULATING = ("calcul", "arithmet", "math", "comput")
_NEGATIVE = re.compile(r"\b(?:without|don't use|do not use|never use|no)\b", re.IGNORECASE)


def invalid(message):
    """An INVALID_INPUT failure."""
    return StageError(Code.STAGE_ERROR_CODE_INVALID_INPUT, message)


def plan(req):
    """Returns the PlanResponse of req, or raises StageError."""
    goal = req.goal.strip()
    if not goal:
        raise invalid("goal must not be empty")
    if len(goal.encode()) > MAX_GOAL_BYTES:
        raise invalid(f"goal is {len(goal.encode())} bytes, the limit is {MAX_GOAL_BYTES} bytes")
    if req.run_id and len(req.run_id.encode()) > MAX_RUN_ID_BYTES:
        raise invalid(f"run_id: run id is {len(req.run_id.encode())} bytes long; at most {MAX_RUN_ID_BYTES} are allowed")
    if req.run_id and not _RUN_ID.fullmatch(req.run_id):
        raise invalid(f"run_id: run id {req.run_id!r} may hold only letters, digits, '_' and '-'")
    if req.max_steps < 0:
        raise invalid(f"max_steps must not be negative, got {req.max_steps}")
    _check_limits(req)
    limit = req.max_steps or DEFAULT_MAX_STEPS
    tools = _index_tools(req.available_tools)
    task_type = req.task_type.strip().lower().removeprefix("task_type_")
    if task_type not in TASK_TYPES:
        raise invalid(f"unknown task_type {req.task_type!r} (want question, action, creative or analysis)")
    _validate_revision(req)

    if req.proposed_steps:
        steps = normalise(req.proposed_steps, tools, limit)
    elif req.HasField("revision"):
        steps = revise(req.revision, req.available_tools, req.constraints, tools, limit)
    else:
        steps = generate(goal, task_type, req.available_tools, req.constraints, limit)

    done = {p.step.id for p in req.revision.steps if p.state == State.STEP_STATE_DONE}
    return planning_service_pb2.PlanResponse(
        steps=steps,
        estimated_steps=sum(1 for s in steps if s.id not in done) + 1,
        requires_human_approval=any(s.tool_name and tools[s.tool_name].requires_approval for s in steps),
        source=SOURCE,
    )


def _check_limits(req):
    """Refuses a request over one of the limits of its fields, naming the field and the limit."""
    if req.max_steps > MAX_STEPS_LIMIT:
        raise invalid(f"max_steps: at most {MAX_STEPS_LIMIT}, got {req.max_steps}")
    if len(req.constraints) > MAX_CONSTRAINTS:
        raise invalid(f"constraints: at most {MAX_CONSTRAINTS}, got {len(req.constraints)}")
    size = sum(len(c.encode()) for c in req.constraints)
    if size > MAX_CONSTRAINTS_BYTES:
        raise invalid(f"constraints: at most {MAX_CONSTRAINTS_BYTES} bytes in all, got {size}")
    if len(req.available_tools) > MAX_TOOLS:
        raise invalid(f"available_tools: at most {MAX_TOOLS}, got {len(req.available_tools)}")
    for i, tool in enumerate(req.available_tools):
        if len(tool.name.encode()) > MAX_TOOL_NAME_BYTES:
            raise invalid(f"available_tools[{i}].name: at most {MAX_TOOL_NAME_BYTES} bytes, got {len(tool.name.encode())}")
    size = sum(len(t.description.encode()) for t in req.available_tools)
    if size > MAX_TOOL_DESCRIPTIONS_BYTES:
        raise invalid(f"available_tools: descriptions at most {MAX_TOOL_DESCRIPTIONS_BYTES} bytes in all, got {size}")
    if len(req.revision.reason.encode()) > MAX_REASON_BYTES:
        raise invalid(f"revision.reason: at most {MAX_REASON_BYTES} bytes, got {len(req.revision.reason.encode())}")
    for i, p in enumerate(req.revision.steps):
        if len(p.note.encode()) > MAX_NOTE_BYTES:
            raise invalid(f"revision.steps[{i}].note: at most {MAX_NOTE_BYTES} bytes, got {len(p.note.encode())}")
        if p.output.fields:
            size = len(json.dumps(json_format.MessageToDict(p.output), separators=(",", ":"),
                                  sort_keys=True, ensure_ascii=False).encode())
            if size > MAX_OUTPUT_BYTES:
                raise invalid(f"revision.steps[{i}].output: at most {MAX_OUTPUT_BYTES} bytes of JSON, got {size}")
    if len(req.revision.steps) > MAX_STEPS_LIMIT:
        raise invalid(f"revision.steps: at most {MAX_STEPS_LIMIT}, got {len(req.revision.steps)}")
    steps = [(f"proposed_steps[{i}]", s) for i, s in enumerate(req.proposed_steps)]
    steps += [(f"revision.steps[{i}].step", p.step) for i, p in enumerate(req.revision.steps)]
    for field, step in steps:
        for name, value, limit in (("id", step.id, MAX_STEP_ID_BYTES),
                                   ("description", step.description, MAX_GOAL_BYTES),
                                   ("tool_name", step.tool_name, MAX_TOOL_NAME_BYTES)):
            if len(value.encode()) > limit:
                raise invalid(f"{field}.{name}: at most {limit} bytes, got {len(value.encode())}")
        if len(step.depends_on) > MAX_STEPS_LIMIT:
            raise invalid(f"{field}.depends_on: at most {MAX_STEPS_LIMIT} ids, got {len(step.depends_on)}")
        for j, dep in enumerate(step.depends_on):
            if len(dep.encode()) > MAX_STEP_ID_BYTES:
                raise invalid(f"{field}.depends_on[{j}]: at most {MAX_STEP_ID_BYTES} bytes, got {len(dep.encode())}")


def _index_tools(available):
    """Maps the available tools by name, refusing empty and repeated names."""
    tools = {}
    for i, tool in enumerate(available):
        if not tool.name.strip():
            raise invalid(f"available_tools[{i}] has an empty name")
        if tool.name in tools:
            raise invalid(f"tool {tool.name!r} appears twice in available_tools")
        tools[tool.name] = tool
    return tools


def _validate_revision(req):
    """Checks the revision of req, if it has one."""
    if not req.HasField("revision"):
        return
    if req.proposed_steps:
        raise invalid("proposed_steps and revision exclude each other: a revision is planned, proposed steps are only validated")
    if not req.revision.steps:
        raise invalid("revision.steps must not be empty: it is the plan to revise")
    for i, progress in enumerate(req.revision.steps):
        if not progress.HasField("step"):
            raise invalid(f"revision.steps[{i}].step must be set")
        if progress.state not in (State.STEP_STATE_PENDING, State.STEP_STATE_DONE, State.STEP_STATE_FAILED):
            raise invalid(f"revision.steps[{i}].state must be pending, done or failed, got {State.Name(progress.state)}")


def generate(goal, task_type, available, constraints, limit):
    """Makes a plan of the goal: one step per clause, each depending on the one before."""
    usable = usable_tools(available, constraints)
    if task_type == "action" and not usable:
        raise StageError(Code.STAGE_ERROR_CODE_NO_VIABLE_PLAN,
                         "an action needs a tool, and no tool is available (or the constraints rule every one out)")
    clauses = split_goal(goal)
    if len(clauses) > limit:
        raise StageError(Code.STAGE_ERROR_CODE_PLAN_TOO_COMPLEX,
                         f"the goal has {len(clauses)} steps, the limit is {limit}")
    steps = []
    for i, clause in enumerate(clauses, start=1):
        step = message_pb2.Step(id=f"{STEP_PREFIX}{i}", description=clause, tool_name=best_tool(clause, usable))
        if steps:
            step.depends_on.append(steps[-1].id)
        steps.append(step)
    return steps


def split_goal(goal):
    """Splits a goal into its clauses: lines (bullets and numbers dropped), ";" and "then"."""
    clauses = []
    for line in goal.splitlines():
        for part in _THEN.split(_BULLET.sub("", line).replace(";", "\n")):
            for clause in part.split("\n"):
                clause = _LEADING.sub("", clause.strip()).strip(" \t,")
                if clause:
                    clauses.append(clause)
    return clauses or [goal]


def usable_tools(available, constraints):
    """The available tools that no negative constraint ("without x", "don't use x") names."""
    banned = " ".join(c.lower() for c in constraints if _NEGATIVE.search(c))
    return [t for t in available
            if t.name.lower() not in banned and t.name.lower().replace("_", " ") not in banned]


def best_tool(text, tools):
    """The tool whose words overlap text most (its name's words count twice, and arithmetic
    in text counts three times for a tool that calculates); "" for none."""
    words, arithmetic = _words(text), bool(_ARITHMETIC.search(text))
    best, best_score = "", 0
    for tool in tools:
        name, description = _words(re.sub(r"[_-]", " ", tool.name)), _words(tool.description)
        score = 2 * len(words & name) + len(words & description)
        if arithmetic and any(w.startswith(_CALCULATING) for w in name | description):
            score += 3
        if score > best_score:
            best, best_score = tool.name, score
    return best


def _words(text):
    """The stemmed words of text, without stop words."""
    return {_stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP_WORDS}


def _stem(word):
    """Drops one common suffix, so that "calculate" and "calculator" meet."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def revise(revision, available, constraints, tools, limit):
    """Revises a plan: steps keep their ids, order and dependencies; a step that is not done
    and uses a tool that failed gets the best other usable tool (none: a reasoning step)."""
    failed = {p.step.tool_name for p in revision.steps if p.state == State.STEP_STATE_FAILED and p.step.tool_name}
    others = [t for t in usable_tools(available, constraints) if t.name not in failed]
    steps = []
    for progress in revision.steps:
        step = message_pb2.Step()
        step.CopyFrom(progress.step)
        if progress.state != State.STEP_STATE_DONE and step.tool_name in failed:
            step.tool_name = best_tool(step.description, others)
        steps.append(step)
    return normalise(steps, tools, limit)


def normalise(proposed, tools, limit):
    """Validates steps and returns trimmed copies in a stable topological order."""
    steps, index = [], {}
    for i, p in enumerate(proposed):
        step_id = p.id.strip()
        if not step_id:
            raise invalid(f"proposed step {i + 1} has an empty id")
        if step_id in index:
            raise invalid(f"duplicate step id {step_id!r}")
        index[step_id] = i
        steps.append(message_pb2.Step(id=step_id, description=p.description.strip(), tool_name=p.tool_name.strip()))
    for step, p in zip(steps, proposed):
        for dep in (d.strip() for d in p.depends_on):
            if dep not in index:
                raise invalid(f"step {step.id!r} depends on unknown step {dep!r}")
            if dep not in step.depends_on:
                step.depends_on.append(dep)
    if len(steps) > limit:
        raise StageError(Code.STAGE_ERROR_CODE_PLAN_TOO_COMPLEX, f"plan has {len(steps)} steps, the limit is {limit}")
    for step in steps:
        if step.tool_name and step.tool_name not in tools:
            available = ", ".join(sorted(tools)) or "none"
            raise StageError(Code.STAGE_ERROR_CODE_NO_VIABLE_PLAN,
                             f"step {step.id!r} uses tool {step.tool_name!r}, which is not available (available: {available})")
    return _topological(steps, index)


def _topological(steps, index):
    """Orders steps so that each comes after its dependencies (the first ready step goes first);
    a dependency cycle is NO_VIABLE_PLAN."""
    placed, order = set(), []
    while len(order) < len(steps):
        ready = next((s for s in steps if s.id not in placed and all(d in placed for d in s.depends_on)), None)
        if ready is None:
            cycle = sorted((s.id for s in steps if s.id not in placed), key=index.get)
            raise StageError(Code.STAGE_ERROR_CODE_NO_VIABLE_PLAN, "circular dependency: steps " + ", ".join(cycle) + " can never start")
        placed.add(ready.id)
        order.append(ready)
    return order
