// The sinklab spec language. Compiled by the ANTLR tool at build time; the
// generated parser never leaves compiler/parse.cpp, which turns its tree into
// our own AST (compiler/ast.h).
grammar Sink;

file        : topLevel* EOF ;
topLevel    : importDecl | experimentDecl | sweepDecl ;

importDecl     : 'import' STRING ';'? ;
experimentDecl : 'experiment' name=ident ('extends' base=ident)? '{' statement* '}' ;
sweepDecl      : 'sweep' name=ident 'over' base=ident '{' sweepItem* '}' ;
sweepItem      : path 'in' expr ';'?        # sweepAxis
               | statement                  # sweepStatement
               ;

statement   : ident '{' statement* '}'                  # blockStatement
            | 'fix' 'token' expr 'at' expr ';'?         # fixStatement
            | 'random' 'at' expr ';'?                   # randomStatement
            | path '=' expr ';'?                        # assignStatement
            ;

path        : ident ('.' ident)* ;

// Precedence: earlier alternatives bind tighter.
expr        : '(' expr ')'                              # parenExpr
            | ident '(' (arg (',' arg)* ','?)? ')'      # callExpr
            | '[' (expr (',' expr)* ','?)? ']'          # listExpr
            | NUMBER unit='tokens'?                     # numberExpr
            | STRING                                    # stringExpr
            | ident                                     # nameExpr
            | <assoc=right> expr '^' expr               # powExpr
            | '-' expr                                  # negExpr
            | expr op=('*' | '/') expr                  # mulExpr
            | expr op=('+' | '-') expr                  # addExpr
            ;
arg         : (ident '=')? expr ;

// Keywords stay usable as names where a name is expected
// (`first_token = random`, a field called `token`).
ident       : IDENT | 'random' | 'fix' | 'token' | 'at' | 'in' | 'over'
            | 'tokens' | 'import' | 'experiment' | 'sweep' | 'extends' ;

// Entry points used outside whole files: `--set path=value` on the command
// line, and expressions read back from a plan.toml.
overrideEntry : path '=' expr EOF ;
exprEntry     : expr EOF ;

NUMBER      : DIGITS ('.' DIGITS?)? EXPONENT? SUFFIX?
            | '.' DIGITS EXPONENT? SUFFIX? ;
fragment DIGITS   : [0-9] ('_'? [0-9])* ;
fragment EXPONENT : [eE] [+-]? [0-9]+ ;
fragment SUFFIX   : [KMBT] ;
STRING      : '"' (~["\\\r\n] | '\\' .)* '"' ;
IDENT       : [a-zA-Z_] [a-zA-Z_0-9]* ;
LINE_COMMENT  : '//' ~[\r\n]* -> skip ;
BLOCK_COMMENT : '/*' .*? '*/' -> skip ;
WS          : [ \t\r\n\f]+ -> skip ;
ANY         : . ;
