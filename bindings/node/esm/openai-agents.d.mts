export * from "../dist/openai-agents.cjs";
