// A Node client of agentmesh.agent.v1.AgentService, loaded straight from the .proto files.
// Usage: node client.mjs <orchestrator address> <message>
// Prints one JSON object: the tools, the Run result and the StreamRun event kinds.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import loader from '@grpc/proto-loader';

const [addr, message] = process.argv.slice(2);
if (!addr || !message) {
  console.error('usage: node client.mjs <address> <message>');
  process.exit(4);
}
const protoDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../proto');
const definition = loader.loadSync('agentmesh/agent/v1/agent_service.proto', {
  includeDirs: [protoDir], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
});
const { AgentService } = grpc.loadPackageDefinition(definition).agentmesh.agent.v1;
const client = new AgentService(addr, grpc.credentials.createInsecure());
const deadline = () => new Date(Date.now() + 60_000);

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
    invalid = { code: err.code, details: err.details };
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
