export * from "../dist/iqai-adk.cjs";
