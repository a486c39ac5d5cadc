export * from './families';
export * from './schema';
export * from './errors';
export * from './format';
export * from './resolve';
export * from './suite-location';
export * from './suite-plan';
export * from './loader';
export { taskPageHtml } from './pages';
