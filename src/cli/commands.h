#ifndef BRIGADE_CLI_COMMANDS_H
#define BRIGADE_CLI_COMMANDS_H

int cmd_init(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_pipeline(int argc, char **argv);
int cmd_report(int argc, char **argv);

#endif
