export * from "../dist/google-adk.cjs";
