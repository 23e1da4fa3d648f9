// A Node client of agentmesh.agent.v1.AgentService, loaded straight from the .proto files.
// Usage: node client.mjs <orchestrator address> <message>
// Prints one JSON object: the tools, the Run result, the StreamRun event kinds and the error of a
// bad request with its StageError detail (examples/README.md, "Node").
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import loader from '@grpc/proto-loader';
import protobuf from 'protobufjs';

const [addr, message] = process.argv.slice(2);
if (!addr || !message) {
  console.error('usage: node client.mjs <address> <message>');
  process.exit(4);
}
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const protoDir = path.join(repo, 'proto');
const includeDirs = [protoDir, path.join(repo, 'examples/proto')];
const definition = loader.loadSync('agentmesh/agent/v1/agent_service.proto', {
  includeDirs: [protoDir], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
});
const { AgentService } = grpc.loadPackageDefinition(definition).agentmesh.agent.v1;
const client = new AgentService(addr, grpc.credentials.createInsecure());
const deadline = () => new Date(Date.now() + 60_000);

// The StageError detail of an error: google.rpc.Status in the grpc-status-details-bin trailer.
const root = new protobuf.Root();
root.resolvePath = (_origin, target) =>
  includeDirs.map((d) => path.join(d, target)).find((f) => fs.existsSync(f)) ?? target;
root.loadSync(['google/rpc/status.proto', 'agentmesh/type/v1/stage_error.proto'], { keepCase: true });
const Status = root.lookupType('google.rpc.Status');
const StageError = root.lookupType('agentmesh.type.v1.StageError');
const stageErrorType = 'type.googleapis.com/agentmesh.type.v1.StageError';

const stageError = (err) => {
  const [trailer] = err.metadata?.get('grpc-status-details-bin') ?? [];
  const any = trailer && Status.decode(trailer).details.find((d) => d.type_url === stageErrorType);
  return any ? StageError.toObject(StageError.decode(any.value), { enums: String }) : null;
};

const unary = (method, request) => new Promise((resolve, reject) =>
  client[method](request, { deadline: deadline() }, (err, res) => (err ? reject(err) : resolve(res))));

const stream = (request) => new Promise((resolve, reject) => {
  const kinds = [];
  const call = client.StreamRun(request, { deadline: deadline() });
  call.on('data', (ev) => kinds.push({ seq: Number(ev.seq), kind: ev.kind }));
  call.on('error', reject);
  call.on('end', () => resolve(kinds));
});

try {
  const tools = await unary('ListTools', {});
  const result = await unary('Run', { message, user_id: 'node-client' });
  const events = await stream({ message, user_id: 'node-client' });
  let invalid = null;
  try {
    await unary('GetRun', { run_id: '' });
  } catch (err) {
    invalid = { code: err.code, details: err.details, stage_error: stageError(err) };
  }
  console.log(JSON.stringify({
    tools: tools.tools.map((t) => t.name),
    outcome: result.outcome,
    exit_reason: result.exit_reason,
    answer: result.final_report.content,
    roles: result.conversation.map((m) => m.role),
    events,
    invalid,
  }));
  client.close();
} catch (err) {
  console.error(`agentmesh node client: ${err.code ?? ''} ${err.details ?? err.message}`);
  client.close();
  process.exit(1);
}
